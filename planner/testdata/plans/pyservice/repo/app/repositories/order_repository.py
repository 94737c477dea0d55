from app.models import Order


class OrderRepository:
    def get(self, order_id):
        return None
