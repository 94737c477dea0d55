package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/taskloom/taskloom/config"
)

func Example() {
	repo, err := os.MkdirTemp("", "taskloom-config")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(repo)
	file := filepath.Join(repo, config.FileName)
	err = os.WriteFile(file, []byte(`{"parallel_workers": 2, "verify": {"timeout": "15m"}}`), 0o644)
	if err != nil {
		panic(err)
	}

	// The user ran `taskloom run PRODUCT.md --workers 4`.
	flags := pflag.NewFlagSet("run", pflag.ContinueOnError)
	flags.Int("workers", 1, "parallel workers")
	flags.String("model", "", "model spec")
	if err := flags.Parse([]string{"--workers", "4"}); err != nil {
		panic(err)
	}

	cfg, err := config.Load(config.LoadOpts{
		RepoDir:  repo,
		Flags:    flags,
		FlagKeys: map[string]string{"workers": "parallel_workers", "model": "model"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("parallel_workers:", cfg.ParallelWorkers) // the flag beats the file
	fmt.Println("verify.timeout:", cfg.Verify.Timeout)    // from the file
	fmt.Println("model:", cfg.Model)                      // the default: --model was not set

	// A typo in the file names the key and the closest one.
	err = os.WriteFile(file, []byte(`{"paralel_workers": 2}`), 0o644)
	if err != nil {
		panic(err)
	}
	_, err = config.Load(config.LoadOpts{RepoDir: repo})
	var unknown *config.UnknownKeyError
	if errors.As(err, &unknown) {
		fmt.Printf("unknown key %q, did you mean %s?\n", unknown.Key, unknown.Suggestion)
	}
	// Output:
	// parallel_workers: 4
	// verify.timeout: 15m
	// model: anthropic:claude-sonnet-4-5
	// unknown key "paralel_workers", did you mean parallel_workers?
}

func ExampleConfig_Validate() {
	cfg := config.Default()
	cfg.TaskSizeLimits.ComplexityThreshold = 20
	fmt.Println(cfg.Validate())
	// Output:
	// task_size_limits.complexity_threshold: must be between 0 and 13, got 20
}

func ExampleConfig_Redacted() {
	cfg := config.Default()
	cfg.Database.URL = "postgres://taskloom:s3cret@db.internal:5432/taskloom"
	fmt.Println(cfg.Redacted().Database.URL)
	// Output:
	// postgres://taskloom:xxxxx@db.internal:5432/taskloom
}
