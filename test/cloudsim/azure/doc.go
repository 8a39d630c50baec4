// Package azuresim is a wire-level Azure Resource Manager simulator.
package azuresim
