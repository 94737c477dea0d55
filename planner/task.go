package planner

import "strings"

// Status is a task's place in its life cycle.
type Status string

// Task statuses.
const (
	StatusPending    Status = "pending"
	StatusInProgress Status = "in_progress"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusBlocked    Status = "blocked"
	StatusSkipped    Status = "skipped"
)

// Priority orders available tasks.
type Priority string

// Task priorities, most urgent first.
const (
	PriorityCritical Priority = "critical"
	PriorityHigh     Priority = "high"
	PriorityMedium   Priority = "medium"
	PriorityLow      Priority = "low"
)

// Rank returns 0 for critical up to 3 for low, and 4 for anything else.
func (p Priority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PriorityHigh:
		return 1
	case PriorityMedium:
		return 2
	case PriorityLow:
		return 3
	}
	return 4
}

// Level buckets a complexity total.
type Level string

// Complexity levels: LOW below 5, MEDIUM below 8, HIGH below 11,
// CRITICAL otherwise.
const (
	LevelLow      Level = "LOW"
	LevelMedium   Level = "MEDIUM"
	LevelHigh     Level = "HIGH"
	LevelCritical Level = "CRITICAL"
)

// Complexity is a task's score, 0 to 13.
type Complexity struct {
	FileScope              float64 `json:"file_scope"`
	CrossFileDeps          float64 `json:"cross_file_deps"`
	SemanticComplexity     float64 `json:"semantic_complexity"`
	RequirementUncertainty float64 `json:"requirement_uncertainty"`
	TokenPenalty           float64 `json:"token_penalty"`
	Total                  float64 `json:"total"`
	Level                  Level   `json:"level"`
}

// Task is one unit of work.
type Task struct {
	ID                  string     `json:"id"`
	Title               string     `json:"title"`
	UserStory           string     `json:"user_story"`
	AcceptanceCriteria  []string   `json:"acceptance_criteria"`
	FilesToCreate       []string   `json:"files_to_create"`
	FilesToModify       []string   `json:"files_to_modify"`
	TestFiles           []string   `json:"test_files"`
	Dependencies        []string   `json:"dependencies"`
	MilestoneID         string     `json:"milestone_id"`
	Priority            Priority   `json:"priority"`
	Status              Status     `json:"status"`
	Attempts            int        `json:"attempts"`
	MaxAttempts         int        `json:"max_attempts"`
	Complexity          Complexity `json:"complexity"`
	EstimatedMinutes    float64    `json:"estimated_minutes"`
	SplitFrom           string     `json:"split_from,omitempty"`
	ImplementationNotes string     `json:"implementation_notes,omitempty"`
	Error               string     `json:"error,omitempty"`
	// LinearIssueID is the task's issue in Linear, once the run's sync
	// made or found it.
	LinearIssueID string `json:"linear_issue_id,omitempty"`
}

// FileOf is the file a files entry names: a pytest node ID
// ("tests/test_a.py::test_b") names the file before its "::".
func FileOf(entry string) string {
	file, _, _ := strings.Cut(entry, "::")
	return file
}

// Files returns the task's files to create, modify and test, in that order,
// without duplicates.
func (t *Task) Files() []string {
	seen := make(map[string]bool, len(t.FilesToCreate)+len(t.FilesToModify)+len(t.TestFiles))
	var out []string
	for _, list := range [][]string{t.FilesToCreate, t.FilesToModify, t.TestFiles} {
		for _, f := range list {
			if f = FileOf(f); !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// Milestone groups tasks. Its status is derived from its tasks.
type Milestone struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Status      Status `json:"status,omitempty"`
}
