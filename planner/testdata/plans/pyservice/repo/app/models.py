from app.db import Base


class Order(Base):
    __tablename__ = "orders"
