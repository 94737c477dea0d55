import { isEmail } from "../lib/validation";

export interface User {
  id: string;
  email: string;
}

export function validUser(u: User): boolean {
  return isEmail(u.email);
}
