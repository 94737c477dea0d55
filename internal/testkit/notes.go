package testkit

import "fmt"

// ReviewNote is the reviewer's note of the notes fixture: the scripted
// models of the review tests write good notes on T1's retry only when its
// prompt carries this note.
const ReviewNote = "write good notes"

// NotesProduct is a PRODUCT.md of two independent tasks that list their
// files, so no model plans them: T1 writes notes.txt and T2 log.txt. The
// priorities are the tests' to choose, since with one worker they decide
// which task runs first.
func NotesProduct(t1Priority, t2Priority string) string {
	return fmt.Sprintf(`# notes

## Milestone M1: Notes
Files with notes.

### Task T1: Write the notes file
- user_story: As a user, I want a notes file, so that I remember things
- priority: %s
- files_to_create: notes.txt
- acceptance_criteria: notes.txt holds good notes

### Task T2: Write the log file
- user_story: As a user, I want a log file, so that I see what happened
- priority: %s
- files_to_create: log.txt
- acceptance_criteria: log.txt holds a good log
`, t1Priority, t2Priority)
}
