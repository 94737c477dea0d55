package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/llm"
)

// recorder is a model that records every request before passing it on.
type recorder struct {
	llms.Model
	mu   sync.Mutex
	reqs [][]llms.MessageContent
}

func (r *recorder) GenerateContent(ctx context.Context, msgs []llms.MessageContent, opts ...llms.CallOption) (*llms.ContentResponse, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, append([]llms.MessageContent(nil), msgs...))
	r.mu.Unlock()
	return r.Model.GenerateContent(ctx, msgs, opts...)
}

// scripted returns a recording scripted model with one conversation per
// (match, replies) pair.
func scripted(t *testing.T, convs ...any) *recorder {
	t.Helper()
	s := &llm.Script{}
	for i := 0; i < len(convs); i += 2 {
		c := llm.Conversation{Match: convs[i].(string)}
		for _, r := range convs[i+1].([]string) {
			c.Replies = append(c.Replies, llm.Reply{Content: r})
		}
		s.Conversations = append(s.Conversations, c)
	}
	require.NoError(t, s.Validate())
	return &recorder{Model: llm.NewScripted(s)}
}

func text(m llms.MessageContent) string {
	var parts []string
	for _, p := range m.Parts {
		if tc, ok := p.(llms.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

const product = "# Notes app\n\nA tiny notes app.\n"

const goodReply = `{"milestones": [{"id": "M1", "name": "Core", "description": "the core"}],
 "tasks": [
  {"id": "T1", "title": "Note model", "user_story": "As a user I want notes", "acceptance_criteria": ["A note has a title"],
   "files_to_create": ["notes/note.go"], "test_files": ["notes/note_test.go"], "milestone_id": "M1", "priority": "high"},
  {"id": "T2", "title": "Note list", "user_story": "As a user I want a list", "acceptance_criteria": ["Notes are listed"],
   "files_to_modify": ["notes/note.go"], "dependencies": ["T1"], "milestone_id": "M1", "priority": "medium"}]}`

const matchAll = `Break down this PRODUCT\.md`

func requireGoodPlan(t *testing.T, raw *RawPlan) {
	t.Helper()
	require.NotNil(t, raw)
	require.Len(t, raw.Tasks, 2)
	require.Equal(t, "T1", raw.Tasks[0].ID)
	require.Equal(t, []string{"T1"}, raw.Tasks[1].Dependencies)
}

func TestBreakdownValid(t *testing.T) {
	t.Parallel()
	m := scripted(t, matchAll, []string{goodReply})
	raw, err := Breakdown(t.Context(), m, product, nil)
	require.NoError(t, err)
	requireGoodPlan(t, raw)
	require.Len(t, m.reqs, 1)
	req := m.reqs[0]
	require.Equal(t, llms.ChatMessageTypeSystem, req[0].Role)
	require.Equal(t, llms.ChatMessageTypeHuman, req[1].Role)
	require.Equal(t, BreakdownLine+"\n\n"+product, text(req[1]), "prompt contract: the line, then the PRODUCT.md")
}

func TestBreakdownFenced(t *testing.T) {
	t.Parallel()
	m := scripted(t, matchAll, []string{"Here is your plan:\n\n```json\n" + goodReply + "\n```\n\nLet me know!"})
	raw, err := Breakdown(t.Context(), m, product, nil)
	require.NoError(t, err)
	requireGoodPlan(t, raw)
	require.Len(t, m.reqs, 1)
}

func TestBreakdownTruncatedRepaired(t *testing.T) {
	t.Parallel()
	cut := strings.TrimSuffix(goodReply, "]}") // ends after the last task object
	m := scripted(t, matchAll, []string{"```json\n" + cut + ",\n"})
	// The trailing comma after the last task says more was coming: re-ask.
	_, err := Breakdown(t.Context(), m, product, &Opts{MaxReasks: -1})
	require.Error(t, err)

	m = scripted(t, matchAll, []string{"```json\n" + cut})
	raw, err := Breakdown(t.Context(), m, product, nil)
	require.NoError(t, err, "closed brackets after a complete task")
	requireGoodPlan(t, raw)
	require.Len(t, m.reqs, 1, "repaired without asking again")
}

func TestBreakdownTruncatedReasked(t *testing.T) {
	t.Parallel()
	cut := goodReply[:strings.Index(goodReply, "Note list")+4] // inside a string
	m := scripted(t, matchAll, []string{cut, goodReply})
	raw, err := Breakdown(t.Context(), m, product, nil)
	require.NoError(t, err)
	requireGoodPlan(t, raw)
	require.Len(t, m.reqs, 2)
	second := m.reqs[1]
	require.Len(t, second, 4, "system, user, the bad answer, the problems")
	require.Equal(t, llms.ChatMessageTypeAI, second[2].Role)
	require.Equal(t, cut, text(second[2]))
	require.Equal(t, llms.ChatMessageTypeHuman, second[3].Role)
	require.Equal(t, "Your answer is not a valid plan. Fix every problem below and reply with the complete corrected JSON object only, no prose and no code fences.\n"+
		"- invalid JSON at line 5, column 30: unexpected end of input (the JSON is truncated)\n", text(second[3]))
}

func TestBreakdownReasksWithExactErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, bad string
		problems  []string
	}{
		{
			name:     "wrong types",
			bad:      strings.Replace(strings.Replace(goodReply, `["A note has a title"]`, `"A note has a title"`, 1), `"priority": "high"`, `"priority": 1`, 1),
			problems: []string{"tasks[0].acceptance_criteria: must be an array of strings, got string", "tasks[0].priority: must be a string, got number"},
		},
		{
			name:     "unknown dependency IDs",
			bad:      strings.Replace(goodReply, `"dependencies": ["T1"]`, `"dependencies": ["T1", "T9"]`, 1),
			problems: []string{`tasks[1].dependencies[1]: unknown task "T9"`},
		},
		{
			name: "a dependency cycle",
			bad:  strings.Replace(goodReply, `"milestone_id": "M1", "priority": "high"`, `"milestone_id": "M1", "priority": "high", "dependencies": ["T2"]`, 1),
			problems: []string{"tasks[0].dependencies: dependency cycle T1 -> T2 -> T1 (counting file-based dependencies: " +
				"a task that modifies or tests a file depends on the task that creates it)"},
		},
		{
			name:     "no JSON at all",
			bad:      "I need more details before I can plan this.",
			problems: []string{"the reply contains no JSON object; reply with the raw tasks JSON object only"},
		},
		{
			name:     "an empty plan",
			bad:      `{"milestones": [{"id": "M1", "name": "x"}], "tasks": []}`,
			problems: []string{"tasks: must have at least one task (taskloom never invents placeholder tasks)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := scripted(t, matchAll, []string{tt.bad, goodReply})
			raw, err := Breakdown(t.Context(), m, product, nil)
			require.NoError(t, err)
			requireGoodPlan(t, raw)
			require.Len(t, m.reqs, 2)
			want := "Your answer is not a valid plan. Fix every problem below and reply with the complete corrected JSON object only, no prose and no code fences.\n"
			for _, p := range tt.problems {
				want += "- " + p + "\n"
			}
			require.Equal(t, want, text(m.reqs[1][3]))
		})
	}
}

func TestBreakdownNeverValid(t *testing.T) {
	t.Parallel()
	bad := strings.Replace(goodReply, `"dependencies": ["T1"]`, `"dependencies": ["T7"]`, 1)
	m := scripted(t, matchAll, []string{"not JSON", `{"tasks": [`, bad})
	raw, err := Breakdown(t.Context(), m, product, nil)
	require.Nil(t, raw, "no tasks")
	require.ErrorIs(t, err, ErrInvalidPlan)
	var be *BreakdownError
	require.ErrorAs(t, err, &be)
	require.Equal(t, 3, be.Attempts)
	require.Equal(t, []Issue{{Path: "tasks[1].dependencies[0]", Msg: `unknown task "T7"`}}, be.Issues)
	require.EqualError(t, err, `breakdown: the model gave no valid plan after 3 attempts; problems in its last answer: tasks[1].dependencies[0]: unknown task "T7"`)
	require.Len(t, m.reqs, 3, "asked again at most twice")

	p, err := FromProduct(t.Context(), scripted(t, matchAll, []string{"no", "no", "no"}), product, nil)
	require.Nil(t, p)
	require.ErrorAs(t, err, &be)
}

func TestBreakdownMaxReasks(t *testing.T) {
	t.Parallel()
	m := scripted(t, matchAll, []string{"no", "no", "no", "no", goodReply})
	raw, err := Breakdown(t.Context(), m, product, &Opts{MaxReasks: 4})
	require.NoError(t, err)
	requireGoodPlan(t, raw)
	require.Len(t, m.reqs, 5)
}

// lengthModel answers once, with a stop reason of "length".
type lengthModel struct{ reply string }

func (m lengthModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

func (m lengthModel) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: m.reply, StopReason: "length"}}}, nil
}

func TestBreakdownCutAtTokenLimit(t *testing.T) {
	t.Parallel()
	cut := strings.TrimSuffix(goodReply, "]}")
	_, err := Breakdown(t.Context(), lengthModel{cut}, product, &Opts{MaxReasks: -1})
	var be *BreakdownError
	require.ErrorAs(t, err, &be)
	require.Equal(t, 1, be.Attempts)
	require.Equal(t, "invalid JSON at line 6, column 109: unexpected end of input (the JSON is truncated) (the reply was cut off at the output limit: make the plan more compact)",
		be.Issues[0].String(), "a reply cut at the token limit is not closed: more tasks may have followed")
}

func TestBreakdownModelError(t *testing.T) {
	t.Parallel()
	m := scripted(t, "never matches", []string{goodReply})
	_, err := Breakdown(t.Context(), m, product, nil)
	require.ErrorIs(t, err, llm.ErrNoMatch)
	require.ErrorContains(t, err, "breakdown: model call 1: ")
}

func TestBreakdownNoModel(t *testing.T) {
	t.Parallel()
	_, err := Breakdown(t.Context(), nil, product, nil)
	require.ErrorIs(t, err, ErrNoModel)
	_, err = Breakdown(t.Context(), nil, "  \n", nil)
	require.EqualError(t, err, ErrEmpty("").Error())
	require.ErrorContains(t, err, "PRODUCT.md is empty: ")
}

func TestBreakdownExplicitTaskList(t *testing.T) {
	t.Parallel()
	md := "# App\n\n## Milestone M1: Core\n\n### Task T1: First\n- acceptance_criteria: it works\n"
	raw, err := Breakdown(t.Context(), nil, md, nil)
	require.NoError(t, err, "no model needed")
	require.Equal(t, "First", raw.Tasks[0].Title)
}

func TestBreakdownBySection(t *testing.T) {
	t.Parallel()
	section := func(name, body string) string {
		return "## " + name + "\n\n" + strings.Repeat(body+"\n", 4)
	}
	md := "# Shop\n\nAn online shop.\n\n" +
		section("Catalog", "Products have a name and a price.") +
		"```\n## Not a heading inside a fence\n```\n" +
		section("Cart", "Users add products to a cart.") +
		section("Checkout", "Users pay for the cart.")
	plan := func(ms string, tasks ...string) string {
		return fmt.Sprintf(`{"milestones": [{"id": "M1", "name": %q}], "tasks": [%s]}`, ms, strings.Join(tasks, ","))
	}
	task := func(id, title, create, modify, deps string) string {
		return fmt.Sprintf(`{"id": %q, "title": %q, "acceptance_criteria": ["ok"], "milestone_id": "M1",
		  "files_to_create": [%s], "files_to_modify": [%s], "dependencies": [%s]}`, id, title, create, modify, deps)
	}
	m := scripted(t,
		`(?s)Break down this PRODUCT\.md\s+# Shop.*## Catalog`, []string{plan("Catalog",
			task("T1", "Product model", `"shop/product.go"`, ``, ``),
			task("T2", "Product list", `"shop/list.go"`, ``, `"T1"`))},
		`(?s)Break down this PRODUCT\.md\s+# Shop.*## Cart`, []string{
			plan("Cart", task("T1", "Cart", `"shop/cart.go", "shop/product.go"`, ``, ``)),
			plan("Cart", task("T1", "Cart", `"shop/cart.go"`, `"shop/product.go"`, ``))},
		`(?s)Break down this PRODUCT\.md\s+# Shop.*## Checkout`, []string{plan("Checkout",
			task("A", "Payment", `"shop/pay.go"`, `"shop/cart.go"`, ``),
			task("B", "Receipt", `"shop/receipt.go"`, ``, `"A"`))},
	)
	raw, err := Breakdown(t.Context(), m, md, &Opts{SectionChars: 200})
	require.NoError(t, err)
	require.Len(t, m.reqs, 4, "one call per section, plus one re-ask")
	for i, req := range m.reqs {
		require.Contains(t, text(req[1]), "\n"+BreakdownLine+"\n\n# Shop\n\nAn online shop.\n\n## ", "request %d: the preamble leads every part", i)
	}
	require.Contains(t, text(m.reqs[0][1]), "This is part 1 of 3")
	require.NotContains(t, text(m.reqs[0][1]), "## Cart")
	require.Contains(t, text(m.reqs[1][1]), "Files already created by earlier parts (modify them, do not create them again): shop/list.go, shop/product.go\n")
	require.Contains(t, text(m.reqs[2][3]), `tasks[0].files_to_create[1]: "shop/product.go" is already created by an earlier part of the plan (task T1); list it in files_to_modify`)

	require.Equal(t, []RawMilestone{{ID: "M1", Name: "Catalog"}, {ID: "M2", Name: "Cart"}, {ID: "M3", Name: "Checkout"}}, raw.Milestones)
	var got []string
	for _, task := range raw.Tasks {
		got = append(got, fmt.Sprintf("%s %s %s deps=%v", task.ID, task.MilestoneID, task.Title, task.Dependencies))
	}
	require.Equal(t, []string{
		"T1 M1 Product model deps=[]",
		"T2 M1 Product list deps=[T1]",
		"T3 M2 Cart deps=[]",
		"T4 M3 Payment deps=[]",
		"T5 M3 Receipt deps=[T4]",
	}, got, "renumbered, with dependencies rewritten")

	p, err := Build(raw, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"T1"}, p.Task("T3").Dependencies, "file-based dependency across sections")
	require.Equal(t, []string{"T3"}, p.Task("T4").Dependencies)
}

func TestSectionChunks(t *testing.T) {
	t.Parallel()
	md := "# T\n" + "## A\naaaa\n" + "## B\nbbbb\n" + "## C\n" + strings.Repeat("c", 50) + "\n"
	require.Len(t, sectionChunks(md, 1000), 1, "small files go whole")
	got := sectionChunks(md, 30)
	require.Equal(t, []chunk{
		{title: "A", text: "# T\n## A\naaaa\n## B\nbbbb\n"},
		{title: "C", text: "# T\n## C\n" + strings.Repeat("c", 50) + "\n"},
	}, got)
	require.Len(t, sectionChunks("# T\n"+strings.Repeat("x", 100), 30), 1, "no sections: one chunk")
}

func TestFromProduct(t *testing.T) {
	t.Parallel()
	p, err := FromProduct(t.Context(), scripted(t, matchAll, []string{goodReply}), product, &Opts{Workers: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"T1", "T2"}, ids(p.Tasks))
	require.Equal(t, 2, p.Schedule.Workers)
	require.True(t, errors.Is(fmt.Errorf("x: %w", &BreakdownError{}), ErrInvalidPlan))
}
