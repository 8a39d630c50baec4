package framework

import "testing"

func TestFreeThird(t *testing.T) {
	tests := []struct {
		name string
		want int
		used []int
		out  int
	}{
		{"nothing used", 40, nil, 40},
		{"wanted one used", 40, []int{40}, 45},
		{"a network of the run used", 40, []int{42}, 47},
		{"another run's first network, whose next ones come later", 40, []int{37}, 42},
		{"wraps at the end of the range", 205, []int{200}, 205},
		{"a block that wraps", 206, []int{208}, 13},
		{"all used keeps the wish", 40, seq(10, 210), 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[int]bool{}
			for _, u := range tt.used {
				used[u] = true
			}
			if got := freeThird(tt.want, used); got != tt.out {
				t.Errorf("freeThird(%d, %v) = %d, want %d", tt.want, tt.used, got, tt.out)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
