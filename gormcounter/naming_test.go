package gormcounter

import (
	"strings"
	"testing"

	"gorm.io/gorm/schema"
)

// The side tables' names follow the naming strategy they are asked under,
// each time: a name remembered for one strategy is never handed to
// another (a prefix, singular tables), and a strategy with a replacer,
// which is not remembered, still gets its own names.
func TestSideTableNamesFollowTheNamingStrategyAskedUnder(t *testing.T) {
	cases := []struct {
		ns          schema.Namer
		slots, owns string
	}{
		{schema.NamingStrategy{}, "post_likes_slots", "post_id"},
		{schema.NamingStrategy{TablePrefix: "app_"}, "app_post_likes_slots", "post_id"},
		{&schema.NamingStrategy{TablePrefix: "app_"}, "app_post_likes_slots", "post_id"},
		{schema.NamingStrategy{SingularTable: true}, "post_likes_slot", "post_id"},
		{schema.NamingStrategy{NameReplacer: replacer{"Likes", "Hearts"}}, "post_hearts_slots", "post_id"},
	}
	for range 2 { // the second time from what the first remembered
		for _, c := range cases {
			table := "posts"
			if s, ok := c.ns.(schema.NamingStrategy); ok && s.TablePrefix != "" {
				table = s.TablePrefix + table
			} else if p, ok := c.ns.(*schema.NamingStrategy); ok && p.TablePrefix != "" {
				table = p.TablePrefix + table
			}
			slots, owner := storageNames(c.ns, table, "likes", "Slot")
			if slots != c.slots || owner != c.owns {
				t.Errorf("%#v: %s, %s; want %s, %s", c.ns, slots, owner, c.slots, c.owns)
			}
		}
	}
}

// replacer replaces one word of a name.
type replacer struct{ old, new string }

func (r replacer) Replace(name string) string { return strings.ReplaceAll(name, r.old, r.new) }
