package watch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// Damage is open (a reason naming database and object) until that
// database heals; the counts and the last heal stay.
func TestDamageIsOpenUntilHealed(t *testing.T) {
	d := NewDamage()
	if st := d.Status(); st.Reason != "" || st.Unhealed != 0 {
		t.Fatalf("fresh tracker: %+v", st)
	}
	d.Damaged("app", &replica.DamageError{Key: "ltx/0/x.ltx", Store: "s3://b/app", What: "corrupt", Err: errors.New("file checksum mismatch")})
	d.Damaged("app", &replica.DamageError{Key: "ltx/0/y.ltx", Store: "s3://b/app", What: "missing", Err: errors.New("gone")})
	st := d.Status()
	if st.Unhealed != 1 || st.Found != 2 || !strings.Contains(st.Reason, "app") || !strings.Contains(st.Reason, "ltx/0/x.ltx") {
		t.Fatalf("after two reports: %+v", st)
	}
	d.Healed("other", "ltx/9/z.ltx", time.Second) // not damaged: nothing changes
	d.Healed("app", "ltx/9/s.ltx", 20*time.Millisecond)
	st = d.Status()
	if st.Unhealed != 0 || st.Reason != "" || st.Healed != 1 || st.LastHeal == nil || st.LastHeal.Object != "ltx/0/x.ltx" || st.LastHeal.Snapshot != "ltx/9/s.ltx" {
		t.Fatalf("after the heal: %+v (last %+v)", st, st.LastHeal)
	}
}
