package config

// Source kinds of Sources.
const (
	SourceDefault = "default"
	SourceFile    = "file"
	SourceEnv     = "env"
	SourceFlag    = "flag"
)

// Sources returns, for every leaf key of the config (dotted, such as
// "database.url"), where the value Load would use comes from: SourceFlag,
// SourceEnv, SourceFile or SourceDefault. It reads what Load reads and
// validates nothing.
func Sources(opts LoadOpts) (map[string]string, error) {
	file, data, err := readFile(opts)
	if err != nil {
		return nil, err
	}
	var fileValues map[string]any
	if file != "" {
		if fileValues, err = decodeFile(file, data); err != nil {
			return nil, err
		}
	}
	out := make(map[string]string, len(leaves()))
	for _, l := range leaves() {
		src := sourceOf(l.key, opts, file, fileValues)
		switch {
		case src == "":
			out[l.key] = SourceDefault
		case src == file:
			out[l.key] = SourceFile
		case len(src) > 2 && src[:2] == "--":
			out[l.key] = SourceFlag
		default:
			out[l.key] = SourceEnv
		}
	}
	return out, nil
}
