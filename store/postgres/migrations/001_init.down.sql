DROP TABLE agent_histories;
DROP TABLE runs;
DROP TABLE writes;
DROP TABLE checkpoints;
DROP TABLE threads;
