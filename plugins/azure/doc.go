// Package azure is Kip's Azure cloud plugin (pre-alpha).
package azure
