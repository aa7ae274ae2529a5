package entcounter

import (
	"fmt"

	"github.com/hotcounter/hotcounter"
)

var (

	// errNotGenerated is that error.
	errNotGenerated = fmt.Errorf("entcounter: the generated code has no HotCounter method: generate with entc.Extensions(entcounter.Extension()): %w", hotcounter.ErrNotConfigured)
)
