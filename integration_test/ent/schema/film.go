package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Film and Viewer are joined by two edge schemas: Fandom, with ent's
// usual composite id (film_id, viewer_id), and Rating, with an id of its
// own and a score. Each side counts its rows of each, by naming the M2M
// edge or the O2M edge ent adds for the edge schema.
type Film struct{ ent.Schema }

// Edges of Film.
func (Film) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("fans", Viewer.Type).Through("fandoms", Fandom.Type),
		edge.To("raters", Viewer.Type).Through("ratings", Rating.Type),
	}
}

// Mixin of Film.
func (Film) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("fan_count", entcounter.Counts("fans")),
		entcounter.Counter("rating_count", entcounter.Counts("ratings")),
		entcounter.Counter("high_count", entcounter.Counts("raters"), entcounter.Where("score >= 4")),
	}
}

// Viewer is the other side.
type Viewer struct{ ent.Schema }

// Edges of Viewer.
func (Viewer) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("films", Film.Type).Ref("fans").Through("fandoms", Fandom.Type),
		edge.From("rated", Film.Type).Ref("raters").Through("ratings", Rating.Type),
	}
}

// Mixin of Viewer.
func (Viewer) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("film_count", entcounter.Counts("fandoms")),
		entcounter.Counter("rated_count", entcounter.Counts("rated")),
	}
}

// Fandom is an edge schema with a composite id, as ent's docs write one.
type Fandom struct{ ent.Schema }

// Annotations of Fandom.
func (Fandom) Annotations() []schema.Annotation {
	return []schema.Annotation{field.ID("film_id", "viewer_id")}
}

// Fields of Fandom.
func (Fandom) Fields() []ent.Field {
	return []ent.Field{
		field.Time("since").Default(time.Now),
		field.Int("film_id"),
		field.Int("viewer_id"),
	}
}

// Edges of Fandom.
func (Fandom) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("film", Film.Type).Unique().Required().Field("film_id"),
		edge.To("viewer", Viewer.Type).Unique().Required().Field("viewer_id"),
	}
}

// Rating is an edge schema with an id of its own and a score.
type Rating struct{ ent.Schema }

// Fields of Rating.
func (Rating) Fields() []ent.Field {
	return []ent.Field{
		field.Int("score").Default(0),
		field.Int("film_id"),
		field.Int("viewer_id"),
	}
}

// Edges of Rating.
func (Rating) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("film", Film.Type).Unique().Required().Field("film_id"),
		edge.To("viewer", Viewer.Type).Unique().Required().Field("viewer_id"),
	}
}
