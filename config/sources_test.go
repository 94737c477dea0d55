package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
)

func TestSources(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(`{"max_attempts": 5, "verify": {"timeout": "2m"}}`), 0o644))
	t.Setenv("TASKLOOM_PARALLEL_WORKERS", "3")
	flags := pflag.NewFlagSet("x", pflag.ContinueOnError)
	flags.String("model", "", "")
	require.NoError(t, flags.Parse([]string{"--model", "scripted:x.json"}))
	src, err := config.Sources(config.LoadOpts{RepoDir: dir, Flags: flags, FlagKeys: map[string]string{"model": "model"}})
	require.NoError(t, err)
	require.Equal(t, config.SourceFile, src["max_attempts"])
	require.Equal(t, config.SourceFile, src["verify.timeout"])
	require.Equal(t, config.SourceEnv, src["parallel_workers"])
	require.Equal(t, config.SourceFlag, src["model"])
	require.Equal(t, config.SourceDefault, src["database.url"])
}
