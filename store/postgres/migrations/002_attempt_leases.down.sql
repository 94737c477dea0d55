DROP TABLE attempt_leases;
