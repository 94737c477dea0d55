def discount(price, pct):
    return price - price * pct // 100


def path_parts(p):
    return p.split("/")
