-- Nothing on this dialect: the virtual column MySQL gets in this version
-- stands in for the partial indexes MySQL does not have.
SELECT 1;
