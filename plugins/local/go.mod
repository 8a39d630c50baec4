module github.com/kipcell/kip/plugins/local

go 1.26

replace github.com/kipcell/kip/pluginapi => ../../pluginapi
