const { refund } = require('./refund-that-does-not-exist');

test('refund', () => {
  expect(refund(1)).toBe(-1);
});
