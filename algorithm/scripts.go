package algorithm

import (
	"embed"

	"github.com/sluicehq/sluice/store"
)

//go:embed lua/*.lua
var luaFS embed.FS

// loadScript returns the embedded Lua twin lua/<name>.lua, after the
// prelude every twin shares (lua/prelude.lua: the clock and exact integer
// division). It panics only if a file is missing from the build, which the
// package's tests catch.
func loadScript(name string) *store.Script {
	prelude, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic("sluice/algorithm: missing embedded lua/prelude.lua")
	}
	src, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("sluice/algorithm: missing embedded script " + name + ".lua")
	}
	return store.NewScript(name, string(prelude)+string(src))
}
