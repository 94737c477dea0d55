DROP TABLE attempt_workers;
DROP TABLE attempt_leases;
