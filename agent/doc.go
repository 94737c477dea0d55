// Package agent is taskloom's built-in coding agent and its workers.
package agent
