import { beforeAll, describe, expect, test } from 'vitest';

describe('db', () => {
  beforeAll(() => {
    throw new Error('database is down');
  });
  test('reads', () => {
    expect(1).toBe(1);
  });
});
