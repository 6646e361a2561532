package proto

import (
	"encoding/json"
	"math"
	"testing"
)

// A REAL value always reads back as a float with its sign and every bit:
// integral values get ".0" (a bare -0 is the integer 0 to Python's parser).
func TestFloatValuesKeepTheirSignAndType(t *testing.T) {
	for f, want := range map[float64]string{
		math.Copysign(0, -1): "-0.0", 0: "0.0", 2: "2.0", -3: "-3.0", 1.5: "1.5",
		1e300: "1e+300", 1.5e-300: "1.5e-300", 123456789012345680: "1.2345678901234568e+17",
	} {
		got := string(appendFloatValue(nil, f))
		if got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
		var back float64
		if err := json.Unmarshal([]byte(got), &back); err != nil || back != f || math.Signbit(back) != math.Signbit(f) {
			t.Errorf("%s reads back as %v (%v)", got, back, err)
		}
	}
}
