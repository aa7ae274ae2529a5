package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/post"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/privacy"
	_ "github.com/hotcounter/hotcounter/integration_test/entprivacy/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/schema"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/schema/mixin"
)

// errNoneUpdated is what a bulk update that updated no row is taken for.
var errNoneUpdated = errors.New("no row updated")

// Every write of a counter runs the schema's privacy policy and its query
// interceptors (ent's documented soft-delete mixin) before anything is
// written or buffered, as ent's own writes do: a reader's write is denied,
// a soft-deleted post is not found (or not updated), and nothing reaches
// the database or the buffer; a writer's write of a live post counts.
// Every path: UpdateOne and Update adds and sets, a rollup counter's add,
// the buffer (typed and by name), an upsert. ent, every database.
func TestEntCounterWritesRunPrivacyAndInterceptors(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		client := entprivacy.NewClient(entprivacy.Driver(entDriverSending(e.kind, openPool(t, e, e.pool), func(string) {})))
		must(t, oneMigrationAtATime(func() error { return client.Schema.Create(ctx, entcounter.WithCounters(client)) }))
		buf, err := entcounter.NewBuffer(ctx, client, hotcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		defer buf.Close(ctx)
		live := client.Post.Create().SetTitle("live").SaveX(ctx)
		gone := client.Post.Create().SetTitle("gone").SaveX(ctx)
		client.Post.DeleteOneID(gone.ID).ExecX(ctx) // soft: the interceptor hides it
		total := func(id int) int64 {
			t.Helper()
			p, err := client.Post.Query().Where(post.ID(id)).Only(entcounter.WithLive(mixin.SkipSoftDelete(ctx)))
			must(t, err)
			return p.Likes + p.Views
		}
		bulk := func(n int, err error) error {
			if err == nil && n == 0 {
				return errNoneUpdated
			}
			return err
		}
		flushed := func(err error) error {
			if err != nil {
				return err
			}
			return buf.Flush(ctx)
		}
		for _, path := range []struct {
			name string
			add  func(ctx context.Context, p *entprivacy.Post) error
			// rowWritten: ent writes the row itself whatever the
			// interceptors hide (an upsert; an update of other fields,
			// which the documented mixin does not filter): the counter
			// of a soft-deleted post must still not change.
			rowWritten bool
		}{
			{name: "UpdateOne AddLikes", add: func(ctx context.Context, p *entprivacy.Post) error {
				return client.Post.UpdateOneID(p.ID).AddLikes(1).Exec(ctx)
			}},
			{name: "UpdateOne SetLikes", add: func(ctx context.Context, p *entprivacy.Post) error {
				cur, err := client.Post.Query().Where(post.ID(p.ID)).Only(entcounter.WithLive(mixin.SkipSoftDelete(ctx)))
				if err != nil {
					return err
				}
				return client.Post.UpdateOneID(p.ID).SetLikes(cur.Likes + 1).Exec(ctx)
			}},
			{name: "UpdateOne AddViews", add: func(ctx context.Context, p *entprivacy.Post) error {
				return client.Post.UpdateOneID(p.ID).AddViews(1).Exec(ctx)
			}},
			{name: "Update AddLikes", add: func(ctx context.Context, p *entprivacy.Post) error {
				return bulk(client.Post.Update().Where(post.ID(p.ID)).AddLikes(1).Save(ctx))
			}},
			{name: "Update AddLikes and SetTitle", rowWritten: true, add: func(ctx context.Context, p *entprivacy.Post) error {
				// (MySQL counts the rows it changed: the title is the same.)
				_, err := client.Post.Update().Where(post.ID(p.ID)).AddLikes(1).SetTitle(p.Title).Save(ctx)
				return err
			}},
			{name: "Buffered AddLikes", add: func(ctx context.Context, p *entprivacy.Post) error {
				return flushed(client.Post.Buffered(buf).AddLikes(ctx, p.ID, 1))
			}},
			{name: "Buffer Increment", add: func(ctx context.Context, p *entprivacy.Post) error {
				return flushed(buf.Increment(ctx, "Post", post.FieldLikes, p.ID, 1))
			}},
			{name: "upsert SetLikes", rowWritten: true, add: func(ctx context.Context, p *entprivacy.Post) error {
				cur, err := client.Post.Query().Where(post.ID(p.ID)).Only(entcounter.WithLive(mixin.SkipSoftDelete(ctx)))
				if err != nil {
					return err
				}
				return client.Post.Create().SetTitle(p.Title).SetLikes(cur.Likes + 1).OnConflictColumns(post.FieldTitle).UpdateNewValues().Exec(ctx)
			}},
		} {
			t.Run(path.name, func(t *testing.T) {
				before := total(live.ID)
				if err := path.add(schema.AsReader(ctx), live); !errors.Is(err, privacy.Deny) {
					t.Errorf("a reader's write: %v, want privacy.Deny", err)
				}
				if got := total(live.ID); got != before {
					t.Errorf("a reader's denied write changed the total from %d to %d", before, got)
				}
				if path.name != "upsert SetLikes" { // an upsert sets the total of the row it meets, as ent writes it
					goneBefore := total(gone.ID)
					err := path.add(ctx, gone)
					if !path.rowWritten && !entprivacy.IsNotFound(err) && !errors.Is(err, errNoneUpdated) {
						t.Errorf("a write of a soft-deleted post: %v, want not found (or no row updated)", err)
					}
					if got := total(gone.ID); got != goneBefore {
						t.Errorf("a write of a soft-deleted post changed its total from %d to %d", goneBefore, got)
					}
				}
				if err := path.add(ctx, live); err != nil {
					t.Fatalf("a writer's write: %v", err)
				}
				if got := total(live.ID); got != before+1 {
					t.Errorf("a writer's write took the total from %d to %d, want %d", before, got, before+1)
				}
			})
		}
	})
}
