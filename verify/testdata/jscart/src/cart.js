// discount is off by one at 50%, so that a test fails.
exports.discount = (price, pct) => price - Math.floor((price * pct) / 100) - (pct === 50 ? 1 : 0);
