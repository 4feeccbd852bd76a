package config

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// docs/CONFIGURATION.md's table is the operator's list of keys and defaults: every key of Config
// has one row, every row is a key, and each row's default is what Default() yields for it. A
// default changed in defaults.go, a key added to Config, or a row edited by hand without the
// other fails here.
func TestConfigurationDocTableIsDefault(t *testing.T) {
	rows := docConfigRows(t)
	keys := map[string]reflect.Value{}
	configKeys(reflect.ValueOf(Default()).Elem(), "", keys)
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		v := keys[key]
		def, ok := rows[key]
		if !ok {
			t.Errorf("%s: no row in docs/CONFIGURATION.md's table", key)
			continue
		}
		want := v.Interface()
		if v.Kind() == reflect.Pointer {
			want = reflect.Zero(v.Type().Elem()).Interface()
			if !v.IsNil() {
				want = v.Elem().Interface()
			}
		}
		got, err := parseDefaultCell(def, v.Type())
		if err != nil {
			t.Errorf("%s: docs/CONFIGURATION.md's default %q: %v", key, def, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: docs/CONFIGURATION.md says %q (%v), Default() has %v", key, def, got, want)
		}
	}
	for key := range rows {
		if _, ok := keys[key]; !ok {
			t.Errorf("docs/CONFIGURATION.md's table has %s, which is not a key of Config", key)
		}
	}
}

// configKeys records every key of the struct v under its dotted YAML path: a nested struct is
// a section whose fields are keys, anything else (a list of routes included, as routes[]) is
// one key.
func configKeys(v reflect.Value, prefix string, into map[string]reflect.Value) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		path := prefix + name
		switch fv := v.Field(i); {
		case f.Type.Kind() == reflect.Struct:
			configKeys(fv, path+".", into)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			into[path+"[]"] = fv
		default:
			into[path] = fv
		}
	}
}

// docConfigRows maps each key of the table in docs/CONFIGURATION.md to its
// default cell, without backticks.
func docConfigRows(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(data)
	rows := map[string]string{}
	for line := range strings.Lines(section) {
		cells := splitRow(line)
		if len(cells) != 3 || cells[0] == "key" || strings.Trim(cells[0], "-") == "" {
			continue
		}
		key, def := strings.Trim(cells[0], "`"), strings.Trim(cells[1], "`")
		if _, dup := rows[key]; dup {
			t.Errorf("docs/CONFIGURATION.md: %s has two rows", key)
		}
		rows[key] = def
	}
	if len(rows) == 0 {
		t.Fatal("docs/CONFIGURATION.md has no table")
	}
	return rows
}

// splitRow splits a Markdown table row into its trimmed cells; an escaped \| stays in its cell.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	line = strings.ReplaceAll(line[1:len(line)-1], `\|`, "\x00")
	cells := strings.Split(line, "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|"))
	}
	return cells
}

// parseDefaultCell decodes a default cell as the YAML value of a key of type typ: "—" is the
// zero value (no default), anything else is decoded as the key's YAML would be.
func parseDefaultCell(cell string, typ reflect.Type) (any, error) {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if cell == "—" {
		return reflect.Zero(typ).Interface(), nil
	}
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: typ, Tag: `yaml:"v"`}}))
	if err := yaml.UnmarshalWithOptions([]byte("v: "+cell+"\n"), holder.Interface(), yaml.Strict()); err != nil {
		return nil, err
	}
	return holder.Elem().Field(0).Interface(), nil
}
