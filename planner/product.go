package planner

import (
	"context"
	"fmt"
	"os"

	"github.com/tmc/langchaingo/llms"
)

// ModelFunc returns the model of a breakdown; it is called only when the
// PRODUCT.md has no explicit task list.
type ModelFunc func() (llms.Model, error)

// FromProductFile reads the PRODUCT.md at path and plans it as
// FromProduct does, naming path in markdown errors and warnings. It asks
// modelFunc for a model only when the file has no explicit task list.
func FromProductFile(ctx context.Context, modelFunc ModelFunc, path string, opts *Opts) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read PRODUCT.md: %w", err)
	}
	o := Opts{}
	if opts != nil {
		o = *opts
	}
	o.ProductName = path
	var model llms.Model
	if !HasTaskList(string(data)) {
		if model, err = modelFunc(); err != nil {
			return nil, NeedsModel(path, string(data), err)
		}
	}
	return FromProduct(ctx, model, string(data), &o)
}
