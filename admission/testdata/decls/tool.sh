#!/bin/sh
# count the lines of the input
wc -c
