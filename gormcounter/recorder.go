package gormcounter

import (
	"database/sql"
	"reflect"
	"strings"

	"gorm.io/gorm"
)

// atlas-provider-gorm (ariga.io/atlas-provider-gorm/gormschema) learns a
// schema by running AutoMigrate on a database/sql driver that records the
// statements it is sent and answers every query with no rows (Atlas's
// recordriver). It opens two *gorm.DB with the configuration it is given:
// one on the dialect's own dialector, whose AutoMigrate it records, and one
// on a wrapper of its own whose migrator it asserts to be its type.
const (
	atlasRecorderPkg = "ariga.io/atlas/sdk/recordriver"
	atlasLoaderPkg   = "ariga.io/atlas-provider-gorm/"
)

// records reports whether db's connection records statements instead of
// running them (Atlas's recordriver): there is no database to read, and a
// migration shows what it makes as a dry run does.
func records(db *gorm.DB) bool {
	pool, ok := db.ConnPool.(*sql.DB)
	return ok && pool != nil && pkgPath(pool.Driver()) == atlasRecorderPkg
}

// loaderDialector reports whether d is atlas-provider-gorm's own wrapper of
// a dialector, whose migrator that loader needs unwrapped: the plugin
// leaves it as it is (the loader's migration runs on the other *gorm.DB).
func loaderDialector(d gorm.Dialector) bool {
	return strings.HasPrefix(pkgPath(d), atlasLoaderPkg)
}

func pkgPath(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.PkgPath()
}
