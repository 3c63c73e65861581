package identity

import "testing"

type (
	userID    string
	accountID int64
	shard     uint16
	token     []byte
	named     struct{ n string }
)

func (n *named) String() string { return n.n }

// Every value the doc names counts, named types included: a UserID
// stored by the application must not fall back to the client's address
// (one user behind N addresses would get N times its quota). A nil
// Stringer is no identity, not a panic.
func TestOf(t *testing.T) {
	var nilNamed *named
	for _, c := range []struct {
		v    any
		want string
	}{
		{"alice", "alice"},
		{userID("alice"), "alice"},
		{[]byte("bob"), "bob"},
		{token("bob"), "bob"},
		{42, "42"},
		{int64(-7), "-7"},
		{accountID(42), "42"},
		{uint8(9), "9"},
		{shard(9), "9"},
		{&named{"carol"}, "carol"},
		{nilNamed, ""},
		{nil, ""},
		{3.5, ""},
		{struct{}{}, ""},
	} {
		if got := Of(c.v); got != c.want {
			t.Errorf("Of(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}
