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
// dominant component, value divided by maximum (ties: cross_file_deps,
// file_scope, semantic_complexity, requirement_uncertainty, that is layers,
// then files, then criteria); when the dominant strategy cannot make two
// parts, the next most dominant is used.
//
// A split works on units: a work file (to create or modify) with its tests
// (a_test.go, test_a.py or tests/test_a.py, a.test.ts, a.spec.tsx; files of
// one stem in one directory, such as x.ts and x.tsx, are one unit; a test
// of no file of the same stem joins a file of its directory, else the tests
// of a directory form a unit of their own). A unit is never divided. Units
// are ordered so that what is imported comes first: by the imports of the
// files that exist in Opts.Repo (a Go package's imports, read with
// go/parser, count for every file of the package, new ones too; Python's
// import and from statements, relative or from the root or src/; TS/JS
// import, export … from and require of relative paths or "@/" and "~/" for
// src/), then by tier (tierTable: models, storage, services, handlers,
// client, wiring; a file of no tier ranks with the services).
//
// A file's tier comes from its extension, then the words of its base name
// from the last (the head of api_client is client), then its directories
// from the innermost out. Words split at punctuation and at case changes
// (bookmarksClient, APIClient) and match in any inflection (repositories,
// cached, retried; see stem). The configurable Keywords layer lists decide
// the layer; the tier table orders within it.
//
// Each criterion goes to the unit it is most about: 10 points when it
// names the unit (path, base name, compound name like bookmark_handler or
// bookmarksClient, or a symbol the file defines in the repository), 1 when
// it uses the unit's one-word base name, 1/n per path word it shares with
// the unit (n units have that word), and 1.5 per distinct word of the
// unit's tier (its file words and hints such as "table", "status",
// "browser", an HTTP route "GET /x" or a status code for the handlers; the
// words of a tier the task has no file of count for the nearest tier it
// has). Ties go to the earlier unit. A criterion about no unit follows the
// criterion before it (else after it); when none is about any unit, the
// criteria are dealt in order, in runs, over the groups.
//
//   - files: one group per directory; the units of a single directory are
//     cut, in order, into ⌈files / max_files_to_create⌉ runs.
//   - layers: one group per tier, merged with its neighbours of the same
//     layer (data, business, presentation) while the result stays within
//     max_criteria_per_task and max_files_to_create. Needs two layers.
//   - criteria: one group per unit; when the criteria are about fewer than
//     two units, the criteria in order in max(2, ⌈n /
//     max_criteria_per_task⌉) runs, each with the units its criteria are
//     about (a run about none gets the first unit).
//
// A group that gets no criterion is merged into the group of the nearest
// tier (the nearest in order on a tie); tests of no work file go to the
// last part. Neighbouring groups are then merged, the smallest pair first
// (a pair of two tiers or layers costs more), down to ⌈n / limit⌉ + 1 parts
// for n criteria (max_criteria_per_task) or files (max_files_to_create),
// whichever needs more, and at most 26. A unit that a criterion names goes
// to that criterion's part too. So every criterion lands in exactly one
// part, every file in at least one, no part is without criteria or files,
// and the first part (in order) that has a file to create creates it; the
// later ones modify it.
//
// Parts are named <id>-a, <id>-b, … (a part split again gives <id>-a-a, …)
// and carry split_from = the ID of the raw task. A part's title is the raw
// task's title with one " [label]": the directory (files), the layer or
// tiers (layers), the tiers (criteria), with ", part i of n" when two parts
// would share a label; a part of a part joins both labels in one bracket.
// The first part inherits the original's dependencies and each later part
// depends on the one before (the split chain). Splitting repeats on every
// part above the threshold; a part no strategy can split further carries a
// warning. A dependency on a split task becomes a dependency on all its
// final parts; a dependency on a part (T3-a) is a dependency on that part,
// and one on a part the split did not make goes to the nearest task or part
// that exists, with a warning.
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
