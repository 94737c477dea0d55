import { Router } from "express";
import { UserRepository } from "../repositories/userRepository";

export function userRoutes(repo: UserRepository): Router {
  const r = Router();
  r.get("/users/:id", async (req, res) => {
    const u = await repo.find(req.params.id);
    u ? res.json(u) : res.sendStatus(404);
  });
  return r;
}
