// One suite for both runners: CommonJS, and describe, test and expect as
// globals (jest's default, vitest's with globals: true), so that jest and
// vitest report on the same cases.
const { discount } = require('./cart');

describe('cart', () => {
  describe('discount', () => {
    test('applies 10%', () => {
      expect(discount(100, 10)).toBe(90);
    });
    test('applies 50%', () => {
      expect(discount(200, 50)).toBe(100);
    });
  });
  describe.each([
    ['a/b', 2],
    ['x[1]::y', 1],
    ['c/d/e', 4],
  ])('parts of %s', (path, n) => {
    test(`has ${n} parts`, () => {
      expect(path.split('/')).toHaveLength(n);
    });
  });
  test('snapshot of the total', () => {
    expect({ total: discount(100, 10) }).toMatchSnapshot();
  });
  test.skip('later', () => {});
  test.todo('refunds');
});
