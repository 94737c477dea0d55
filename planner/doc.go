// Package planner turns a product spec into the plan the pipeline executes:
// validated raw tasks, scored, auto-split, with their
// dependencies checked for cycles and a schedule estimate.
//
// # Entry points
//
//   - ParseRaw and FromRaw read raw tasks JSON ({"milestones": […],
//     "tasks": […]}) and report every problem with its JSON path, such as
//     `tasks[3].dependencies[0]: unknown task "T9"`.
//   - Breakdown asks a model (any langchaingo llms.Model, such as the
//     scripted model of package llm) for raw tasks, or parses the explicit
//     task list of a PRODUCT.md without a model (ParseTaskList; the format
//     is in README.md). FromProduct is Breakdown followed by Build.
//   - Build scores, splits and links the tasks and returns a *Plan whose
//     JSON is the `plan --json` shape. A plan with dependency cycles comes
//     back with a *CycleError.
//
// # Validation
//
// The milestones and tasks arrays are required and not empty. A milestone
// needs id and name. A task needs id, title (at most 80 characters),
// milestone_id (a known milestone) and acceptance_criteria (at least one);
// user_story, files_to_create, files_to_modify, test_files, dependencies
// (known task IDs), priority (critical|high|medium|low, default medium) and
// estimated_minutes (0 < m ≤ 1440) are optional. IDs match
// [A-Za-z0-9][A-Za-z0-9_.-]* and are unique; file paths are relative,
// inside the repository, and cleaned; a file is created by one task only.
// Unknown fields and wrong types are errors; null stands for an absent
// optional field. Duplicate list entries are dropped.
//
// # Breakdown
//
// The first user message holds the line "Break down this PRODUCT.md"
// followed by the text. The answer is taken out of its code fence
// (ExtractJSON), repaired only where that is certain (Repair: comments,
// trailing commas, raw control characters in strings, and closing brackets
// when the text ends right after a complete object or array and the model
// did not stop at its token limit; an unterminated string or a cut value is
// never completed), and validated, together with a cycle check that counts
// file-based dependencies. An invalid answer goes back to the model with
// the exact problems, at most twice by default; then Breakdown fails with a
// *BreakdownError naming them. It never invents placeholder tasks.
// A PRODUCT.md over Opts.SectionChars bytes (default 12000, about 3000
// tokens) with two or more "## " sections is broken down in chunks of whole
// sections; the parts are merged with tasks renumbered T1… and milestones
// M1… in order.
//
// # Complexity (0 to 13)
//
// file_scope is 0.5 per distinct file to create or modify, capped at 5.
// The other components are heuristics on a task's files and text, with
// keyword lists in Keywords (configurable through Opts.Keywords):
//
//   - cross_file_deps (0–2): 0.5 per directory beyond the first, plus 0.5
//     per architectural layer beyond the first, over the files to create
//     and modify. A file's layer (data, business, presentation) comes from
//     its extension (".sql", ".html", …), then the words of its base name,
//     then its directories from the innermost out; unmatched files have no
//     layer here.
//   - semantic_complexity (0–3): 0.75 per distinct Keywords.Semantic word
//     (algorithm, concurrency, transaction, encryption, cache, …) in the
//     acceptance criteria, plus 0.25 per other one found only in the title
//     or user story.
//   - requirement_uncertainty (0–2): 0.5 per distinct Keywords.Vague term
//     (etc, tbd, maybe, if possible, "?", …) in the criteria, plus 0.25 per
//     other one only in the title or user story, plus 0.5 when the user
//     story is empty.
//   - token_penalty (0–1): the input estimate is 500 tokens, plus the text
//     at 4 characters a token, plus 250 per file to create, 600 per file to
//     modify and 300 per test file (EstimateTokens). Over max_input_tokens
//     it is 0.5; over 1.5 × max_input_tokens it is 1.
//
// total is the sum (components rounded to hundredths). The level is LOW
// below 5, MEDIUM below 8, HIGH below 11 and CRITICAL otherwise (LevelOf).
//
// # estimated_minutes
//
// Taken from the raw task when given; else 1 + 0.8 × total, rounded to a
// tenth (MinutesFor), so a task at the default threshold of 5 takes the
// default max_time_minutes of 5. When a task with a given estimate is split,
// the estimate is shared among its parts in proportion to their totals.
//
// # Auto-split
//
// A task whose total is above complexity_threshold is split when
// auto_split is on (otherwise it gets a warning). The strategy follows the
// dominant component, value divided by maximum (ties: file_scope,
// cross_file_deps, semantic_complexity, requirement_uncertainty); when the
// dominant strategy cannot make two parts, the next most dominant is used.
//
//   - files: one part per directory of the files to create and modify
//     (sorted; adjacent directories merged, the smallest pair first, down to
//     at most max(2, number of criteria) parts); files in one directory are
//     halved.
//   - layers: one part per layer present, chained data → business →
//     presentation; files of no layer count as business. Needs two layers.
//   - criteria: the criteria, in order, in max(2, ⌈total / threshold⌉)
//     contiguous groups (at most one per criterion). A file mentioned by
//     criteria (by path or base name) goes to those parts, any other file to
//     every part; the first part that gets a file to create creates it, the
//     later ones modify it.
//
// In the files and layers strategies each criterion goes to the part whose
// file and layer words it shares most, else to the part with the fewest
// criteria so far. A test file goes to the parts that create or modify it,
// else those with a file of the same stem (a_test.go ↔ a.go), else those
// with a file in its directory, else those whose criteria mention it, else
// the last part. So every criterion lands in exactly one part and every
// file in at least one.
//
// Parts are named <id>-a, <id>-b, … (a part split again gives <id>-a-a, …),
// keep the title with a " [label]" suffix, and carry split_from = the ID of
// the raw task. The first part inherits the original's dependencies and
// each later part depends on the one before (the split chain). Splitting
// repeats on every part above the threshold; a part no strategy can split
// further carries a warning. A dependency on a split task becomes a
// dependency on all its final parts.
//
// # Dependencies, cycles and warnings
//
// Besides explicit and split-chain dependencies, a task that modifies or
// tests a file another task creates depends on that task
// (AddFileDependencies). FindCycles lists every elementary cycle (up to
// MaxCycles) as a path that starts and ends at its earliest task in plan
// order, such as T2 -> T5 -> T2; a self-dependency is T1 -> T1. In the
// error and the table, an edge that a file explains names it: T2 -> T5
// (T2 creates src/a.go). The error is one summary line, then one cycle per
// line, at most MaxCyclesInError of them and a count of the rest.
//
// # Forgiving input
//
// Raw tasks JSON and PRODUCT.md may start with a UTF-8 byte order mark and
// use CRLF line ends. Checkboxes ("- [ ] …", "- [x] …") are dropped from
// list items and criteria. Paths are compared as NormalizePath gives them
// ("./src/a.go" is "src/a.go"). A PRODUCT.md heading that looks like a task
// but does not follow "### Task ID: title" ("### T1: x", "### Task T1 - x",
// any case) is read as a task when it is a "###" heading with an ID and a
// title under a milestone, and is otherwise a warning naming its line
// (TaskHeadingWarnings), also when the file goes to the model. Markdown
// problems, schema problems included, name their line: "PRODUCT.md:12: …".
// Warnings report the soft limits of task_size_limits (files to create and
// modify, criteria, input tokens, minutes) on the final tasks, unsplittable
// parts, tasks left above the threshold, and milestones without tasks.
//
// # Milestones and schedule
//
// A milestone's status is failed if any of its tasks failed, completed if
// all are completed (or skipped), in_progress if any is in progress, and
// pending otherwise (MilestoneStatus). The schedule comes from
// Opts.ScheduleFunc, by default EstimateSchedule: the critical path by
// estimated minutes, the lower bound max(critical path, total / workers),
// and a list-scheduling makespan that follows the documented selection order and
// keeps running tasks' files disjoint.
package planner
