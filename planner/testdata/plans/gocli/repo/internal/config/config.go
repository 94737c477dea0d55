package config

// Config is the notes configuration.
type Config struct{ Dir string }

// Load reads the configuration.
func Load() (Config, error) { return Config{Dir: "."}, nil }
