import { useEffect, useState } from "react";
import { getJSON } from "../api/apiClient";

export function UserList() {
  const [users, setUsers] = useState<{ id: string; email: string }[]>([]);
  useEffect(() => { getJSON<typeof users>("/api/users").then(setUsers); }, []);
  return <ul>{users.map((u) => <li key={u.id}>{u.email}</li>)}</ul>;
}
