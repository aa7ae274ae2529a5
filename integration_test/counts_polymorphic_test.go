package integration_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Counts through a polymorphic has-many relation (GORM's
// `polymorphic:Owner`): remarks on articles and on videos, in one table,
// counted per owner. Articles' counts are kept by triggers, videos' by
// hooks.

// Article counts its remarks, of the open ones too (triggers).
type Article struct {
	ID          uint
	Title       string
	RemarkCount int64    `gorm:"counter:counts=Remarks"`
	OpenCount   int64    `gorm:"counter:counts=Remarks,where=status = 'open'"`
	Remarks     []Remark `gorm:"polymorphic:Owner"`
}

// Video counts its remarks (hooks).
type Video struct {
	ID          uint
	Title       string
	RemarkCount int64    `gorm:"counter:counts=Remarks,hooks"`
	Remarks     []Remark `gorm:"polymorphic:Owner"`
}

// Remark belongs to an article or a video.
type Remark struct {
	ID        uint
	OwnerID   uint   `gorm:"index:idx_remark_owner,priority:2"`
	OwnerType string `gorm:"size:20;index:idx_remark_owner,priority:1"`
	Status    string `gorm:"size:20"`
}

func TestPolymorphicCountsCountPerOwnerTypeAndFollowMovesBetweenThem(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Article{}, &Video{}, &Remark{}))
		article, video := Article{Title: "a", Remarks: []Remark{{Status: "open"}, {Status: "closed"}}}, Video{Title: "v", Remarks: []Remark{{Status: "open"}}}
		must(t, db.Create(&article).Error)
		must(t, db.Create(&video).Error)
		// The same key under two types: each counts only its own remarks.
		if article.ID != video.ID {
			t.Fatalf("article %d and video %d: the test wants one key under both types", article.ID, video.ID)
		}
		check := func(when string) {
			t.Helper()
			var as []Article
			var vs []Video
			must(t, db.Find(&as).Error)
			must(t, db.Find(&vs).Error)
			for _, a := range as {
				all := rawInt(t, db, "SELECT COUNT(*) FROM remarks WHERE owner_type = 'articles' AND owner_id = ?", a.ID)
				open := rawInt(t, db, "SELECT COUNT(*) FROM remarks WHERE owner_type = 'articles' AND owner_id = ? AND status = 'open'", a.ID)
				if a.RemarkCount != all || a.OpenCount != open {
					t.Errorf("%s: article %d: RemarkCount %d OpenCount %d, COUNT(*) %d and %d", when, a.ID, a.RemarkCount, a.OpenCount, all, open)
				}
			}
			for _, v := range vs {
				if all := rawInt(t, db, "SELECT COUNT(*) FROM remarks WHERE owner_type = 'videos' AND owner_id = ?", v.ID); v.RemarkCount != all {
					t.Errorf("%s: video %d: RemarkCount %d, COUNT(*) %d", when, v.ID, v.RemarkCount, all)
				}
			}
		}
		check("created with remarks")
		moved := article.Remarks[0].ID
		must(t, db.Model(&Remark{}).Where("id = ?", moved).Updates(map[string]any{"owner_type": "videos", "owner_id": video.ID}).Error)
		check("a remark moved from an article to a video")
		must(t, db.Model(&Video{ID: video.ID}).Association("Remarks").Append(&Remark{Status: "open"}))
		must(t, db.Model(&Article{ID: article.ID}).Association("Remarks").Append(&Remark{Status: "open"}))
		check("remarks appended")
		must(t, db.Exec("INSERT INTO remarks (owner_id, owner_type, status) VALUES (?, 'articles', 'open')", article.ID).Error)
		must(t, db.Where("owner_type = ? AND owner_id = ?", "videos", video.ID).Delete(&Remark{}).Error)
		check("a raw insert for the article, the video's remarks deleted")
		var a Article
		must(t, db.First(&a, article.ID).Error)
		if a.RemarkCount != 3 || a.OpenCount != 2 {
			t.Fatalf("article counts %d remarks, %d open; want 3 and 2", a.RemarkCount, a.OpenCount)
		}
		must(t, db.Exec("UPDATE article_remark_count_slots SET n = n + 4").Error)
		n, err := gormcounter.Recount(db.Model(&Article{}), "RemarkCount")
		must(t, err)
		if n != 1 {
			t.Fatalf("recount corrected %d articles, want 1", n)
		}
		check("after a recount")
	})
}
