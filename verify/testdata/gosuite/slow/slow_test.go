package slow

import (
	"os"
	"testing"
	"time"
)

func TestForever(t *testing.T) {
	if os.Getenv("SUITE_FAIL") != "" {
		time.Sleep(time.Hour)
	}
}
