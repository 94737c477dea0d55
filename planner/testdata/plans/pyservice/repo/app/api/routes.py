from fastapi import APIRouter

from app.services.order_service import OrderService

router = APIRouter()
