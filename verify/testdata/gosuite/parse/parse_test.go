package parse

import (
	"fmt"
	"os"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, p := range []string{"a/b", "a/b/c", "with space/and/slash", "x"} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			if got := Split(p); len(got) == 0 {
				t.Fatalf("Split(%q) is empty", p)
			}
			t.Run("nested/deeper still", func(t *testing.T) {
				if os.Getenv("SUITE_FAIL") != "" && p == "a/b" {
					t.Errorf("Split(%q) nested: forced failure", p)
				}
			})
		})
	}
}

func TestSkipped(t *testing.T) {
	t.Skip("not on this machine")
}

func TestNoTrailingNewline(t *testing.T) {
	fmt.Print("printed without a newline")
	if os.Getenv("SUITE_FAIL") != "" {
		t.Error("forced failure after output without a newline")
	}
}
