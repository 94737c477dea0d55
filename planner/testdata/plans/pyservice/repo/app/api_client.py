import httpx


class PaymentsClient:
    def charge(self, amount):
        return httpx.post("/charges", json={"amount": amount})
