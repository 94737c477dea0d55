import express from "express";
import { userRoutes } from "./handlers/userHandler";
import { UserRepository } from "./repositories/userRepository";

export const app = express();
app.use("/api", userRoutes(new UserRepository()));
