package oncekey
