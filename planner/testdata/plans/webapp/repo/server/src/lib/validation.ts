export function isEmail(s: string): boolean {
  return /^[^@\s]+@[^@\s]+$/.test(s);
}
