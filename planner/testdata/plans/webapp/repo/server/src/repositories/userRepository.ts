import type { User } from "../models/user";
import { pool } from "../db";

export class UserRepository {
  async find(id: string): Promise<User | undefined> {
    const r = await pool.query("SELECT id, email FROM users WHERE id = $1", [id]);
    return r.rows[0];
  }
}
