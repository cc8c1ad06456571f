package app

import (
	"reflect"
	"testing"

	"github.com/capgate/capgate/host/internal/config"
)

// TestReloadComparesEveryField: a change to any field of the configuration
// is either applied by a reload or named as needing a restart, never
// ignored in silence; a field added to config.Config without a place in
// settings fails here.
func TestReloadComparesEveryField(t *testing.T) {
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "File" {
			continue // where the file is, not what it says
		}
		var run, file config.Config
		reflect.ValueOf(&file).Elem().Field(i).Set(nonZero(t, f.Type))
		if n := len(changed(&run, &file, true)) + len(changed(&run, &file, false)); n != 1 {
			t.Errorf("a change to Config.%s is reported by %d settings, want 1", f.Name, n)
		}
	}
}

// nonZero is a value of t other than its zero value.
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(typ, 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(nonZero(t, typ.Key()), reflect.New(typ.Elem()).Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() {
				v.Field(i).Set(nonZero(t, typ.Field(i).Type))
				return v
			}
		}
		t.Fatalf("%s has no exported field to change", typ)
	case reflect.Array:
		v.Index(0).Set(nonZero(t, typ.Elem()))
	case reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
	default:
		t.Fatalf("no non-zero value for %s", typ)
	}
	return v
}
