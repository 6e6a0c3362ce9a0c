package units_test

import (
	"fmt"

	"github.com/scatterkit/scatterkit/tools/internal/units"
)

func Example() {
	n, err := units.ParseBytes("512KiB")
	if err != nil {
		panic(err)
	}
	fmt.Println(n, units.FormatBytes(98_304*264))
	_, err = units.ParseBytes("1.5 bytes")
	fmt.Println(err)
	// Output:
	// 524288 24.75 MiB
	// units: size "1.5 bytes": want an unsigned number and an optional suffix (KiB, MiB, GiB, kB, MB, GB)
}
