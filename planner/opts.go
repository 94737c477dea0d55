package planner

import (
	"fmt"
	"log/slog"

	"github.com/tmc/langchaingo/llms"
)

// Limits are the task_size_limits of the product contract. The file, criteria, token and
// time limits are soft: exceeding them produces a warning. The complexity
// threshold triggers the auto-split when AutoSplit is on.
type Limits struct {
	MaxFilesToCreate    int     `json:"max_files_to_create"`
	MaxFilesToModify    int     `json:"max_files_to_modify"`
	MaxCriteriaPerTask  int     `json:"max_criteria_per_task"`
	MaxInputTokens      int     `json:"max_input_tokens"`
	MaxTimeMinutes      float64 `json:"max_time_minutes"`
	ComplexityThreshold float64 `json:"complexity_threshold"`
	AutoSplit           bool    `json:"auto_split"`
}

// DefaultLimits returns the defaults of the product contract.
func DefaultLimits() Limits {
	return Limits{
		MaxFilesToCreate:    5,
		MaxFilesToModify:    8,
		MaxCriteriaPerTask:  7,
		MaxInputTokens:      6000,
		MaxTimeMinutes:      5,
		ComplexityThreshold: 5.0,
		AutoSplit:           true,
	}
}

// Validate checks every limit. Errors name the config key and the rule.
func (l Limits) Validate() error {
	positive := []struct {
		key string
		v   int
	}{
		{"max_files_to_create", l.MaxFilesToCreate},
		{"max_files_to_modify", l.MaxFilesToModify},
		{"max_criteria_per_task", l.MaxCriteriaPerTask},
		{"max_input_tokens", l.MaxInputTokens},
	}
	for _, p := range positive {
		if p.v < 1 {
			return fmt.Errorf("task_size_limits.%s: must be at least 1, got %d", p.key, p.v)
		}
	}
	if !(l.MaxTimeMinutes > 0) {
		return fmt.Errorf("task_size_limits.max_time_minutes: must be greater than 0, got %g", l.MaxTimeMinutes)
	}
	if !(l.ComplexityThreshold >= 0 && l.ComplexityThreshold <= MaxTotal) {
		return fmt.Errorf("task_size_limits.complexity_threshold: must be between 0 and %g, got %g", MaxTotal, l.ComplexityThreshold)
	}
	return nil
}

// Keywords are the word lists behind the scoring heuristics (see the package
// doc). Matching is case-insensitive; an entry of one word matches whole
// words, an entry of several words (or with punctuation) matches as a
// substring. In Opts, a nil Keywords or a nil list means the default list;
// an empty non-nil list disables that heuristic.
type Keywords struct {
	// Semantic words raise semantic_complexity (algorithm, concurrency, …).
	Semantic []string `json:"semantic"`
	// Vague words raise requirement_uncertainty (etc, maybe, tbd, …).
	Vague []string `json:"vague"`
	// DataLayer, BusinessLayer and PresentationLayer classify a file into an
	// architectural layer by its path segments and extension (".sql").
	DataLayer         []string `json:"data_layer"`
	BusinessLayer     []string `json:"business_layer"`
	PresentationLayer []string `json:"presentation_layer"`
}

// DefaultKeywords returns the built-in keyword lists.
func DefaultKeywords() Keywords {
	return Keywords{
		Semantic: []string{
			"algorithm", "async", "asynchronous", "concurrent", "concurrency", "parallel",
			"goroutine", "thread", "lock", "mutex", "race", "atomic", "distributed",
			"consensus", "transaction", "migration", "encryption", "encrypt", "crypto",
			"authentication", "authorization", "oauth", "security", "cache", "caching",
			"recursive", "recursion", "optimize", "optimization", "performance", "real-time",
			"realtime", "streaming", "websocket", "protocol", "parser", "compiler",
			"scheduler", "scheduling", "queue", "retry", "backoff", "idempotent",
			"synchronization", "sync", "pagination", "rate limit", "state machine",
		},
		Vague: []string{
			"etc", "tbd", "maybe", "possibly", "probably", "might", "somehow",
			"something", "various", "appropriate", "appropriately", "as needed",
			"if needed", "if possible", "and so on", "user-friendly", "intuitive",
			"robust", "nice", "better", "improve", "clean up", "flexible", "seamless",
			"and/or", "?",
		},
		DataLayer:         tierWords(layerData),
		BusinessLayer:     tierWords(layerBusiness),
		PresentationLayer: tierWords(layerPresentation),
	}
}

// Defaults of the breakdown.
const (
	// DefaultMaxReasks is how many times the breakdown asks the model again
	// after an invalid answer.
	DefaultMaxReasks = 2
	// DefaultSectionChars is the PRODUCT.md size (in bytes) above which the
	// breakdown goes one "## " section at a time.
	DefaultSectionChars = 12000
	// DefaultMaxAttempts is a task's max_attempts.
	DefaultMaxAttempts = 3
)

// ScheduleFunc estimates the schedule of an acyclic plan with the given
// number of workers. EstimateSchedule is the default; the scheduler package
// can provide a simulation instead.
type ScheduleFunc func(tasks []Task, milestones []Milestone, workers int) Schedule

// Opts configures the planner. A nil *Opts, and every zero field, means the
// default.
type Opts struct {
	// Limits are the task_size_limits; nil means DefaultLimits.
	Limits *Limits
	// Keywords drive the scoring heuristics; nil means DefaultKeywords.
	Keywords *Keywords
	// Workers is the number of parallel workers for the schedule (default 1).
	Workers int
	// MaxAttempts is each task's max_attempts (default 3).
	MaxAttempts int
	// ScheduleFunc computes the schedule (default EstimateSchedule).
	ScheduleFunc ScheduleFunc
	// MaxReasks bounds the breakdown's re-asks after an invalid answer
	// (default 2; a negative value means none).
	MaxReasks int
	// SectionChars is the PRODUCT.md size above which the breakdown goes
	// section by section (default DefaultSectionChars).
	SectionChars int
	// CallOptions are passed to every model call of the breakdown.
	CallOptions []llms.CallOption
	// Logger receives the breakdown's progress; nil discards it.
	Logger *slog.Logger
	// ProductName names the PRODUCT.md in markdown errors and warnings
	// ("PRODUCT.md:12: …"); default DefaultProductName.
	ProductName string
	// Repo is the directory of the repository the plan is for, when one is
	// at hand; "" means none. A split orders its parts by the imports of
	// the files that exist there.
	Repo string
	// CurrentTasks are a run's tasks when an edited PRODUCT.md is planned
	// again (replan): the breakdown is shown them, so that tasks that stay
	// the same keep their IDs.
	CurrentTasks []Task
}

// resolved is Opts with every default filled in.
type resolved struct {
	limits       Limits
	kw           *keywordSet
	workers      int
	maxAttempts  int
	scheduleFunc ScheduleFunc
	maxReasks    int
	sectionChars int
	callOptions  []llms.CallOption
	logger       *slog.Logger
	productName  string
	repo         string
	current      []Task
}

func (o *Opts) resolve() (*resolved, error) {
	if o == nil {
		o = &Opts{}
	}
	r := &resolved{
		limits:       DefaultLimits(),
		workers:      o.Workers,
		maxAttempts:  o.MaxAttempts,
		scheduleFunc: o.ScheduleFunc,
		maxReasks:    o.MaxReasks,
		sectionChars: o.SectionChars,
		callOptions:  o.CallOptions,
		logger:       o.Logger,
		productName:  o.ProductName,
		repo:         o.Repo,
		current:      o.CurrentTasks,
	}
	if r.productName == "" {
		r.productName = DefaultProductName
	}
	if o.Limits != nil {
		r.limits = *o.Limits
	}
	if err := r.limits.Validate(); err != nil {
		return nil, err
	}
	kw := DefaultKeywords()
	if o.Keywords != nil {
		def := kw
		kw = *o.Keywords
		for _, p := range []struct{ dst, def *[]string }{
			{&kw.Semantic, &def.Semantic}, {&kw.Vague, &def.Vague},
			{&kw.DataLayer, &def.DataLayer}, {&kw.BusinessLayer, &def.BusinessLayer},
			{&kw.PresentationLayer, &def.PresentationLayer},
		} {
			if *p.dst == nil {
				*p.dst = *p.def
			}
		}
	}
	r.kw = newKeywordSet(kw)
	if r.workers <= 0 {
		r.workers = 1
	}
	if r.maxAttempts <= 0 {
		r.maxAttempts = DefaultMaxAttempts
	}
	if r.scheduleFunc == nil {
		r.scheduleFunc = EstimateSchedule
	}
	if r.maxReasks == 0 {
		r.maxReasks = DefaultMaxReasks
	} else if r.maxReasks < 0 {
		r.maxReasks = 0
	}
	if r.sectionChars <= 0 {
		r.sectionChars = DefaultSectionChars
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}
