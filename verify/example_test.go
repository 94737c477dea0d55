package verify_test

import (
	"context"
	"fmt"
	"os"

	"github.com/taskloom/taskloom/verify"
)

// A command that exits non-zero fails, whatever it printed; without a
// runner's report the retry is shown its output.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "verify-example-")
	defer os.RemoveAll(dir)
	v, err := verify.Run(context.Background(), dir, verify.Spec{
		Command:       []string{"sh", "-c", "echo 'PASS: 3 tests'; echo 'but the linter found 1 problem'; exit 2"},
		FilesToCreate: []string{"README.md"},
	}, nil)
	if err != nil {
		fmt.Println("cannot run the tests:", err)
		return
	}
	fmt.Println("passed:", v.Passed)
	fmt.Println(v.ErrorContext(4000))
	// Output:
	// passed: false
	// missing files (files_to_create, test_files): README.md
	// the test command exited with code 2
	// output:
	// PASS: 3 tests
	// but the linter found 1 problem
}

func ExampleVerdict_ErrorContext() {
	v := verify.Verdict{
		Format: verify.FormatGoJSON, ExitCode: 1, Total: 4, Failed: 1,
		Failures: []verify.Failure{{
			Name:    "TestParse/a/b",
			Package: "example.com/shop/cart",
			Output:  "    cart_test.go:12: Parse(\"a/b\") = nil, want [a b]\n--- FAIL: TestParse/a/b (0.00s)\n",
		}},
	}
	fmt.Println(v.ErrorContext(4000))
	// Output:
	// 1 of 4 tests failed (go test, exit code 1)
	// --- FAIL: TestParse/a/b (example.com/shop/cart)
	//     cart_test.go:12: Parse("a/b") = nil, want [a b]
}
